# devices

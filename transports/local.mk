# transports

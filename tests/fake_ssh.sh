#!/bin/sh
# fake_ssh.sh: stands in for ssh in tests of agents on one machine: drops ssh's options and the host name, then
# runs the remote command here.
while [ $# -gt 0 ]; do
    case $1 in
    -o) shift 2 ;;
    -*) shift ;;
    *) break ;;
    esac
done
shift
exec sh -c "$*"

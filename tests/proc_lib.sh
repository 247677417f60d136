# proc_lib.sh: process checks for the bash test libraries (sourced by tests/runtime_lib.sh and tests/netns_lib.sh).

# alive PID: a live process (a zombie counts as dead: PID 1 may reap it late). Builtins only, no process per
# call: the tests poll with it on a loaded machine.
alive() {
    local stat state
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    state=${stat##*) }
    state=${state%% *}
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# any_alive PID...: whether one of them is alive.
any_alive() {
    local p
    for p in "$@"; do alive "$p" && return 0; done
    return 1
}

# own_child PID: a live child of this shell. A pid it started and already reaped may belong to any process by
# now (pids wrap at 32768 within minutes on a busy machine), so cleanups signal only what this passes.
own_child() {
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    set -- ${stat##*) }
    [ "$1" != Z ] && [ "$1" != X ] && [ "$2" = "$$" ]
}

#!/bin/sh
# An ssh stand-in for mpiexec's -launcher-exec in tests: "netns_ssh.sh [-x] HOST COMMAND" runs
# COMMAND in the network namespace of HOST, from FLOW_TEST_NETNS="addr=namespace,addr=namespace".
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
for pair in $(echo "$FLOW_TEST_NETNS" | tr ',' ' '); do
    if [ "${pair%%=*}" = "$host" ]; then
        exec ip netns exec "${pair#*=}" sh -c "$*"
    fi
done
echo "netns_ssh.sh: no network namespace for host $host in FLOW_TEST_NETNS" >&2
exit 255

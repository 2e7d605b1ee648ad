#!/bin/sh
# Loads docker/apparmor-worker, the worker containers' AppArmor profile, into the
# kernel (as root, on every host with AppArmor, before the workers start). AppArmor 4
# (Ubuntu 24.04) restricts unprivileged user namespaces: there the profile gets the
# `userns` rule, which older parsers do not know.
set -eu
profile="$(dirname "$0")/apparmor-worker"
if [ ! -d /sys/kernel/security/apparmor ]; then
    echo "load-apparmor: this kernel has no AppArmor; Docker applies no profile here" >&2
    exit 0
fi
major=$(apparmor_parser --version | sed -n 's/^AppArmor parser version \([0-9]*\).*/\1/p')
if [ "${major:-0}" -ge 4 ]; then
    sed 's/^  #userns,$/  userns,/' "$profile" | apparmor_parser --replace --write-cache
else
    apparmor_parser --replace --write-cache "$profile"
fi
echo "load-apparmor: profile jaxplay-worker loaded" >&2

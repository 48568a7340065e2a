#!/usr/bin/env bash
# The system packages rag_lab's tests and its local judge need, installed with apt-get when they
# are missing. `make test` and `.ci/run` run it before any test starts; `make judge` runs it with
# the `judge` group.
#
#   scripts/system_deps.sh [test] [judge]     (no group: test)
#
#   test   redis-server (the Redis stream tests start their own on a free port), postgresql (the
#          store tests run initdb + pg_ctl on loopback), chromium and fonts-wqy-microhei (the replay
#          page and JupyterLab are rendered headless, Chinese text included)
#   judge  cmake, g++ and make (llama.cpp's llama-server is built from source)
#
# Run as root, or as a user with passwordless sudo, it installs what is missing (apt-get update
# first, --no-install-recommends). Otherwise it prints the one command that installs them and exits
# with status 1 without installing anything. With everything present it only checks (no network).
set -euo pipefail

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(test)

have_pg_ctl() {
  compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || command -v pg_ctl >/dev/null
}

have_font() {
  compgen -G "/usr/share/fonts/truetype/wqy/wqy-microhei.tt*" >/dev/null
}

need=()
for group in "${groups[@]}"; do
  case "$group" in
    test)
      command -v redis-server >/dev/null || need+=(redis-server)
      have_pg_ctl || need+=(postgresql)
      command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
      have_font || need+=(fonts-wqy-microhei)
      ;;
    judge)
      command -v cmake >/dev/null || need+=(cmake)
      command -v g++ >/dev/null || need+=(g++)
      command -v make >/dev/null || need+=(make)
      ;;
    *)
      echo "scripts/system_deps.sh: unknown group '$group' (known: test, judge)" >&2
      exit 2
      ;;
  esac
done

[ ${#need[@]} -eq 0 ] && exit 0

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${need[*]}"
if ! command -v apt-get >/dev/null; then
  echo "rag_lab needs these system packages, and this machine has no apt-get: ${need[*]}" >&2
  echo "install them with your package manager, then run the command again" >&2
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "rag_lab needs these system packages, missing here: ${need[*]}" >&2
  echo "install them as root, then run the command again:" >&2
  echo "  sudo sh -c '$install_cmd'" >&2
  exit 1
fi

echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# another apt-get (unattended upgrades, a second checkout's make) may hold the lock: wait for it
lock=(-o DPkg::Lock::Timeout=600)
"${sudo[@]}" apt-get "${lock[@]}" update -qq
"${sudo[@]}" apt-get "${lock[@]}" install -y -qq --no-install-recommends "${need[@]}"

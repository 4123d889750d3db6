#!/bin/sh
# Starts one desktop: X server, session bus, accessibility bus, window manager, and the
# OSWorld-protocol server (in the foreground, so the sandbox lives exactly as long as it).
# The same script is the Docker image's entrypoint and the embedded sandbox's init.
#
# Split mode (started as uid 0 with OSWORLD_AGENT_UID set; docs/integrity.md): Xvfb and the
# server stay the trusted uid 0; the session (bus, accessibility bus, window manager) and
# everything the server later starts for the agent run as the agent's uid, without
# capabilities, with no_new_privs, a process limit and a raised OOM score.
set -eu

: "${HOME:=/home/user}"
: "${SCREEN_WIDTH:=1920}"
: "${SCREEN_HEIGHT:=1080}"
: "${OSWORLD_LISTEN:=tcp:0.0.0.0:5000}"
: "${OSWORLD_ROOT:=/opt/control-osworld}"
export HOME SCREEN_WIDTH SCREEN_HEIGHT
export DISPLAY=:0
export PATH="$OSWORLD_ROOT/venv/bin:$OSWORLD_ROOT/vm/bin:/usr/local/bin:/usr/bin:/bin"
export XAUTHORITY="$HOME/.Xauthority"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-user}"
export NO_AT_BRIDGE=0 GTK_A11Y=atspi GNOME_ACCESSIBILITY=1 QT_ACCESSIBILITY=1
export SAL_USE_VCLPLUGIN=gtk3 MOZ_ENABLE_WAYLAND=0 LANG="${LANG:-C.UTF-8}"
AGENT_XAUTH="$XAUTHORITY"
SPLIT=
if [ "$(id -u)" = 0 ] && [ -n "${OSWORLD_AGENT_UID:-}" ]; then SPLIT=1; fi
# as_agent CMD...: run CMD as the agent (split mode), else as we are.
as_agent() {
  if [ -n "$SPLIT" ]; then
    (echo 1000 >/proc/self/oom_score_adj
     unset OSWORLD_TOKEN
     export XAUTHORITY="$AGENT_XAUTH"
     exec prlimit --nproc="${OSWORLD_AGENT_NPROC:-2048}" -- \
       setpriv --reuid="$OSWORLD_AGENT_UID" --regid="$OSWORLD_AGENT_UID" --clear-groups \
       --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@")
  else
    "$@"
  fi
}
LOGS=/tmp
XVFB_FB=
if [ -n "$SPLIT" ]; then
  LOGS="${OSWORLD_TRUSTED_DIR:-/run/trusted}"
  mkdir -p "$LOGS" && chmod 700 "$LOGS"
  # The home is an empty size-limited tmpfs: seed it from the skeleton, owned by the agent.
  chown "$OSWORLD_AGENT_UID:$OSWORLD_AGENT_UID" "$HOME"
  if [ -n "${OSWORLD_HOME_SKEL:-}" ] && [ -d "$OSWORLD_HOME_SKEL" ]; then
    as_agent cp -r --no-preserve=ownership "$OSWORLD_HOME_SKEL/." "$HOME/"
  fi
  # Screenshots read Xvfb's framebuffer file in the trusted folder: no X request, so an
  # X grab by the agent can neither block nor alter them.
  XVFB_FB="-fbdir $LOGS"
fi
mkdir -p /tmp/.X11-unix && chmod 1777 /tmp/.X11-unix
as_agent mkdir -p "$XDG_RUNTIME_DIR"
as_agent chmod 700 "$XDG_RUNTIME_DIR"
cd "$HOME"

# A cookie in ~/.Xauthority keeps python-xlib from warning on stdout (upstream's client
# parses that stdout). Split mode: the trusted side keeps its own copy.
COOKIE="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
as_agent xauth -q -f "$XAUTHORITY" add :0 . "$COOKIE"
X_AUTH="$XAUTHORITY"
if [ -n "$SPLIT" ]; then
  X_AUTH="$LOGS/Xauthority"
  xauth -q -f "$X_AUTH" add :0 . "$COOKIE"
  export XAUTHORITY="$X_AUTH"
fi
# -nolisten local: no abstract socket, which would be reachable from the host's netns.
# -noreset: otherwise the server resets whenever its last client (e.g. our probe) leaves.
# shellcheck disable=SC2086
Xvfb :0 -screen 0 "${SCREEN_WIDTH}x${SCREEN_HEIGHT}x24" -nolisten tcp -nolisten local -noreset \
  -auth "$X_AUTH" -dpi 96 $XVFB_FB >"$LOGS/xvfb.log" 2>&1 &
# wait_for WHAT CMD...: poll CMD every 20 ms for up to 10 s.
wait_for() {
  what=$1; shift; i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i+1)); [ $i -gt 500 ] && { echo "$what did not start" >&2; cat "$LOGS"/*.log /tmp/*.log >&2; exit 1; }
    sleep 0.02
  done
}
wait_for "Xvfb" xdpyinfo

as_agent dbus-daemon --session --address="unix:path=$XDG_RUNTIME_DIR/bus" --nofork --nopidfile >/tmp/dbus.log 2>&1 &
export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"
for l in /usr/libexec/at-spi-bus-launcher /usr/lib/at-spi2-core/at-spi-bus-launcher; do
  [ -x "$l" ] && { as_agent "$l" --launch-immediately >/tmp/atspi.log 2>&1 & break; }
done
as_agent openbox >/tmp/openbox.log 2>&1 &
# Ready means managed: window activation and upstream's open_file need an EWMH manager.
wait_for "openbox" wmctrl -m

if [ -n "$SPLIT" ]; then
  export OSWORLD_AGENT_XAUTHORITY="$AGENT_XAUTH" OSWORLD_FBDIR="$LOGS" PYTHONNOUSERSITE=1
fi
exec python "$OSWORLD_ROOT/vm/server/osworld_server.py" --listen "$OSWORLD_LISTEN"

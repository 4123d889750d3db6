#!/bin/sh
# Starts one desktop: X server, session bus, accessibility bus, window manager, and the
# OSWorld-protocol server (in the foreground, so the sandbox lives exactly as long as it).
# The same script is the Docker image's entrypoint and the embedded sandbox's init.
set -eu

: "${HOME:=/home/user}"
: "${SCREEN_WIDTH:=1920}"
: "${SCREEN_HEIGHT:=1080}"
: "${OSWORLD_LISTEN:=tcp:0.0.0.0:5000}"
: "${OSWORLD_ROOT:=/opt/control-osworld}"
export HOME SCREEN_WIDTH SCREEN_HEIGHT
export DISPLAY=:0
export PATH="$OSWORLD_ROOT/venv/bin:/usr/local/bin:/usr/bin:/bin"
export XAUTHORITY="$HOME/.Xauthority"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-user}"
export NO_AT_BRIDGE=0 GTK_A11Y=atspi GNOME_ACCESSIBILITY=1 QT_ACCESSIBILITY=1
export SAL_USE_VCLPLUGIN=gtk3 MOZ_ENABLE_WAYLAND=0 LANG="${LANG:-C.UTF-8}"
mkdir -p "$XDG_RUNTIME_DIR" /tmp/.X11-unix && chmod 700 "$XDG_RUNTIME_DIR"
cd "$HOME"

# A cookie in ~/.Xauthority keeps python-xlib from warning on stdout (upstream's client
# parses that stdout).
xauth -q -f "$XAUTHORITY" add :0 . "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# -nolisten local: no abstract socket, which would be reachable from the host's netns.
# -noreset: otherwise the server resets whenever its last client (e.g. our probe) leaves.
Xvfb :0 -screen 0 "${SCREEN_WIDTH}x${SCREEN_HEIGHT}x24" -nolisten tcp -nolisten local -noreset \
  -auth "$XAUTHORITY" -dpi 96 >/tmp/xvfb.log 2>&1 &
# wait_for WHAT CMD...: poll CMD every 20 ms for up to 10 s.
wait_for() {
  what=$1; shift; i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i+1)); [ $i -gt 500 ] && { echo "$what did not start" >&2; cat /tmp/*.log >&2; exit 1; }
    sleep 0.02
  done
}
wait_for "Xvfb" xdpyinfo

dbus-daemon --session --address="unix:path=$XDG_RUNTIME_DIR/bus" --nofork --nopidfile >/tmp/dbus.log 2>&1 &
export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"
for l in /usr/libexec/at-spi-bus-launcher /usr/lib/at-spi2-core/at-spi-bus-launcher; do
  [ -x "$l" ] && { "$l" --launch-immediately >/tmp/atspi.log 2>&1 & break; }
done
openbox >/tmp/openbox.log 2>&1 &
# Ready means managed: window activation and upstream's open_file need an EWMH manager.
wait_for "openbox" wmctrl -m

exec python "$OSWORLD_ROOT/vm/server/osworld_server.py" --listen "$OSWORLD_LISTEN"

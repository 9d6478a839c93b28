"""The process sandbox every service shares: `launcher.py` (standard library only, run as root)
isolates one program — own network (none unless allowed), mount, PID, IPC and UTS namespaces, a
read-only chroot of what it needs, its own working directory, a throw-away uid, resource limits —
and `spec.py` builds what it is given. tools_py's `code_exec` runs Python in it; the MCP bridge
runs admin-registered stdio servers in it."""

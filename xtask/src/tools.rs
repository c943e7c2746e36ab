//! External tools: the Docker engine and the Go-installed CLIs (kind, helm, crictl).

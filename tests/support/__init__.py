"""Test doubles of real infrastructure, speaking the real protocols: a TLS-terminating proxy in
front of the dev server (mTLS, ALPN h2, HTTP/2 header capture) and an OTLP/HTTP span receiver."""

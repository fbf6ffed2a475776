"""What comes from documents and the web, handled as untrusted: screened where it enters
(screening), neutralised where it leaves (display)."""

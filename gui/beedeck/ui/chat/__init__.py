"""The chat pane: conversation list, streamed Markdown view, worker thread (the guard banner is in
``ui/speculation``)."""

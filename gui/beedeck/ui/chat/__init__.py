"""The chat pane: conversation list, streamed Markdown view, worker thread, guard banner."""

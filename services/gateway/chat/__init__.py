"""Conversations: chat runs on the task engine (a run is a task whose DSL is a built-in graph per
mode), with the conversation, its messages and its per-conversation FIFO of runs kept here."""

"""The engine: the dispatcher and the reconciler. Only the engine writes run state."""

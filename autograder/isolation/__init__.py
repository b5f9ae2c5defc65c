"""What runs student code: the sandbox, the kernel it starts, the agent inside it, and the plain values that cross."""

package io.hicache.storage.nixl;

/** A notification string delivered when a transfer finished, from agent {@code agent}. Immutable. */
record Notification(String agent, String message) {}

package io.hicache.storage.nixl.agent;

/** A notification string delivered when a transfer finished, from agent {@code agent}. Immutable. */
public record Notification(String agent, String message) {
}

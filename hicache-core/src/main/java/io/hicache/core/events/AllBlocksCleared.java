package io.hicache.core.events;

/**
 * Everything the publisher announced before is gone, in every tier, as SGLang's {@code AllBlocksCleared}: a router
 * forgets this publisher's blocks. Immutable.
 */
public record AllBlocksCleared() implements KvEvent {}

package io.hicache.core.events;

/**
 * One change in what a cache holds, as SGLang's radix caches announce it to routers: pages stored in a tier
 * ({@link BlockStored}), removed from one ({@link BlockRemoved}), or everything forgotten ({@link AllBlocksCleared}).
 * Implementations are immutable records, safe to share between threads.
 */
public sealed interface KvEvent permits BlockStored, BlockRemoved, AllBlocksCleared {}

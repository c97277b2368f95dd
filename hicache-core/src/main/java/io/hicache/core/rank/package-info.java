/**
 * Rank groups: the collectives that keep the caches of a model's tensor-parallel ranks deciding alike
 * ({@link io.hicache.core.rank.RankGroup}), with an in-process group for ranks that are threads
 * ({@link io.hicache.core.rank.LocalRankGroup}); the transfer module has one across processes.
 */
package io.hicache.core.rank;

/**
 * A rank group across processes over TCP ({@link io.hicache.transfer.rank.TcpRankGroup}): the tensor-parallel ranks of
 * a model instance, on one host or several, reducing the cache's decisions at rank 0.
 */
package io.hicache.transfer.rank;

/**
 * HiCache daemons as a cluster (docs/cluster.md): membership in etcd ({@link io.hicache.cluster.Membership},
 * {@link io.hicache.cluster.MemberRegistration}), placement by hash slots ({@link io.hicache.cluster.Placement}), and
 * the {@code cluster} page store that splits each batch by owner ({@link io.hicache.cluster.ClusterPageStore}).
 */
package io.hicache.cluster;

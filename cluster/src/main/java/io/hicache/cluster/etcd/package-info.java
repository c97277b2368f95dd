/** etcd's v3 API through its JSON gateway, over the JDK's HTTP client: internal to the cluster module. */
package io.hicache.cluster.etcd;

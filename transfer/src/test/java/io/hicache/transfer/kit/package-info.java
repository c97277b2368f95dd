/**
 * The transport conformance kit, its child-JVM peer and its byte patterns. Published in this module's test jar
 * ({@code hicache-transfer}, type {@code test-jar}) so that a transport in another module runs the same cases: its
 * test extends {@link io.hicache.transfer.kit.TransportConformanceKit}, as {@code TcpTransportConformanceTest} and
 * {@code ShmTransportConformanceTest} do here. The kill case starts {@link io.hicache.transfer.kit.TransferPeerMain}
 * in a child JVM on the test class path, so that class path must hold the test jar and the transport.
 */
package io.hicache.transfer.kit;

/** The transport conformance kit, its child-JVM peer and its byte patterns. */
package io.hicache.testkit.transfer;

/**
 * Conformance kits that every implementation runs (the page store kit first, the crash kit, the device runtime kit),
 * fault injection ({@link io.hicache.testkit.FaultyPageStore}), and a runner that executes a kit outside a build tool
 * and reports each case. The reference store they are compared with, {@code memory}, is in the core.
 */
package io.hicache.testkit;

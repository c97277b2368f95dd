/**
 * Conformance kits that every implementation runs (the page store kit first), the reference in-memory
 * store, and a runner that executes a kit outside a build tool and reports each case.
 */
package io.hicache.testkit;

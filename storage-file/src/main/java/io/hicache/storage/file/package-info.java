/**
 * Will hold the file-per-page store and the RocksDB store (issue: storage-file). Nothing is implemented here yet: the module exists so the build, its dependencies
 * and their convergence are in place before that issue lands. See docs/architecture.md.
 */
package io.hicache.storage.file;

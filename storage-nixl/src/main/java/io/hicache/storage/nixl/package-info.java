/**
 * Will hold the NIXL transfer model with POSIX and OBJ plugins, and the NIXL page store (issue: storage-nixl). Nothing is implemented here yet: the module exists so the build, its dependencies
 * and their convergence are in place before that issue lands. See docs/architecture.md.
 */
package io.hicache.storage.nixl;

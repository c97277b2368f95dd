/**
 * Will hold the transfer engine and prefill/decode disaggregation (issue: transfer). Nothing is implemented here yet: the module exists so the build, its dependencies
 * and their convergence are in place before that issue lands. See docs/architecture.md.
 */
package io.hicache.transfer;

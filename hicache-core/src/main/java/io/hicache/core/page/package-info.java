/**
 * The page model: a model's KV geometry, the host layouts, and the sizes and row offsets of a page.
 */
package io.hicache.core.page;

/**
 * The three-tier prefix cache: {@link io.hicache.core.cache.HiCache}, the facade an engine embeds, with its
 * controller loops (device-to-host backups, page store uploads, prefetch queries and transfers, completions), its
 * policies and its metrics and KV events. See docs/embedding.md.
 */
package io.hicache.core.cache;

/**
 * The three-tier prefix cache: {@link io.hicache.core.cache.HiCache}, the facade an engine embeds, with its
 * controller loops (device-to-host backups, page store uploads, prefetch queries and transfers, completions), its
 * policies, its metrics, and the points where it emits KV events ({@code io.hicache.core.events}). See
 * docs/embedding.md and docs/kv-events.md.
 */
package io.hicache.core.cache;

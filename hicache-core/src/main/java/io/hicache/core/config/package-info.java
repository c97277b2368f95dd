/**
 * Configuration: declared settings with units and defaults, read from a file, the environment and flags with
 * one precedence order.
 */
package io.hicache.core.config;

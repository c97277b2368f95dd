/**
 * Small helpers shared by every module: argument and state checks with messages that name the values.
 */
package io.hicache.core.util;

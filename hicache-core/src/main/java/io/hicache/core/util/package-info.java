/**
 * Small helpers every module uses: argument and state checks whose messages name the value ({@code Checks}), the one
 * way HiCache makes threads ({@code Threads}), and the JDK's O_DIRECT open option looked up once
 * ({@code DirectIoOption}).
 */
package io.hicache.core.util;

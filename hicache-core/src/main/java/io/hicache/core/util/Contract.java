package io.hicache.core.util;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * What a check method promises about its arguments, in the syntax the nullness check (NullAway) reads by this simple
 * name: {@code "false, _ -> fail"} says the method throws when its first argument is false, so that code after it may
 * rely on the condition. Documentation and static analysis only; nothing reads it at run time.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.METHOD)
public @interface Contract {
    /** The clauses, as {@code "args -> effect"}, separated by {@code ;}. */
    String value();
}

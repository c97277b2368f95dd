package io.hicache.bench;

import java.math.BigDecimal;
import java.math.MathContext;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** Writes the few JSON shapes the bench reports need: maps, lists, strings, numbers. Stateless. */
final class Json {
    private Json() {
    }

    /** {@code value} as JSON, indented by two spaces per level. */
    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(value, out, 0);
        return out.append('\n').toString();
    }

    private static void write(Object value, StringBuilder out, int depth) {
        switch (value) {
            case null -> out.append("null");
            case String s -> string(s, out);
            case Boolean b -> out.append(b);
            case Double d when d.isNaN() || d.isInfinite() -> out.append("null");
            case Float f when f.isNaN() || f.isInfinite() -> out.append("null");
            // Six significant digits, written out in full: 16112300, not 1.61123e+07.
            case Double d -> out.append(new BigDecimal(d).round(new MathContext(6)).stripTrailingZeros().toPlainString());
            case Number n -> out.append(n);
            case Map<?, ?> map -> {
                out.append('{');
                Iterator<? extends Map.Entry<?, ?>> it = map.entrySet().iterator();
                while (it.hasNext()) {
                    Map.Entry<?, ?> e = it.next();
                    newline(out, depth + 1);
                    string(String.valueOf(e.getKey()), out);
                    out.append(": ");
                    write(e.getValue(), out, depth + 1);
                    if (it.hasNext()) {
                        out.append(',');
                    }
                }
                newline(out, depth);
                out.append('}');
            }
            case List<?> list -> {
                out.append('[');
                for (int i = 0; i < list.size(); i++) {
                    newline(out, depth + 1);
                    write(list.get(i), out, depth + 1);
                    if (i + 1 < list.size()) {
                        out.append(',');
                    }
                }
                newline(out, depth);
                out.append(']');
            }
            default -> string(value.toString(), out);
        }
    }

    private static void newline(StringBuilder out, int depth) {
        out.append('\n').append("  ".repeat(depth));
    }

    private static void string(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}

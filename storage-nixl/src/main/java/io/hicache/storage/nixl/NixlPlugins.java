package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;

/** Finds plugins with {@link ServiceLoader} and picks one as SGLang's HiCacheNixl does. Stateless. */
final class NixlPlugins {
    /** The name that asks for automatic selection. */
    public static final String AUTO = "auto";

    private NixlPlugins() {}

    /** Every plugin on the class path, in priority order. */
    public static List<NixlPlugin> all() {
        return ServiceLoader.load(NixlPlugin.class, NixlPlugins.class.getClassLoader()).stream()
                .map(ServiceLoader.Provider::get)
                .sorted(Comparator.comparingInt(NixlPlugin::priority).thenComparing(NixlPlugin::name))
                .toList();
    }

    /**
     * The parameters of {@code offered} that {@code plugin} reads, as its {@link NixlPlugin#defaultParams()} name
     * them: what the store hands a plugin's backend, whatever the plugin.
     */
    static Map<String, String> paramsFor(NixlPlugin plugin, Map<String, String> offered) {
        Map<String, String> taken = new LinkedHashMap<>();
        for (String key : plugin.defaultParams().keySet()) {
            String value = offered.get(key);
            if (value != null) {
                taken.put(key, value);
            }
        }
        return taken;
    }

    /**
     * The plugin to use: {@code configured} by name (case-insensitive), or for {@link #AUTO} the first in priority
     * order that can run with {@code params}.
     *
     * @throws NixlException {@link NixlStatus#ERR_NOT_FOUND} for an unknown name, {@link NixlStatus#ERR_NOT_SUPPORTED}
     *     when the named plugin (or, for auto, every plugin) cannot run, with the reasons
     */
    public static NixlPlugin choose(List<NixlPlugin> plugins, String configured, Map<String, String> params) {
        if (!AUTO.equalsIgnoreCase(configured)) {
            NixlPlugin p = plugins.stream()
                    .filter(x -> x.name().equalsIgnoreCase(configured))
                    .findFirst()
                    .orElseThrow(() -> new NixlException(
                            NixlStatus.ERR_NOT_FOUND,
                            "no NIXL plugin named '" + configured + "'; there are "
                                    + plugins.stream().map(NixlPlugin::name).toList() + " and " + AUTO));
            p.unavailableReason(params).ifPresent(why -> {
                throw new NixlException(
                        NixlStatus.ERR_NOT_SUPPORTED, "NIXL plugin " + p.name() + " cannot run: " + why);
            });
            return p;
        }
        StringBuilder reasons = new StringBuilder();
        for (NixlPlugin p : plugins) {
            var why = p.unavailableReason(params);
            if (why.isEmpty()) {
                return p;
            }
            reasons.append("; ").append(p.name()).append(": ").append(why.get());
        }
        throw new NixlException(NixlStatus.ERR_NOT_SUPPORTED, "no NIXL plugin can run" + reasons);
    }
}

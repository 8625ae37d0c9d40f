package org.vnodesync.dnthrottle;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/** Map literals for test code (Java 8 has no Map.of): keys and values alternating, kept in that order. */
final class Maps {
    private Maps() {
    }

    static <K, V> Map<K, V> of(K key, V value) {
        return Collections.singletonMap(key, value);
    }

    static <K, V> Map<K, V> of(K key1, V value1, K key2, V value2) {
        Map<K, V> out = new LinkedHashMap<>();
        out.put(key1, value1);
        out.put(key2, value2);
        return Collections.unmodifiableMap(out);
    }
}

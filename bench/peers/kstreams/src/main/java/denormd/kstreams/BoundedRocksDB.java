package denormd.kstreams;

import java.util.Map;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.apache.kafka.streams.state.internals.BlockBasedTableConfigWithAccessibleCache;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * RocksDB memory bounded for the whole application, as the Kafka Streams memory-management
 * guide recommends: every store instance (this topology has 17 stores, times 4 partitions)
 * shares one block cache, and the memtables are charged to that cache. Without it each
 * instance gets its own 50 MiB cache and 3 x 16 MiB memtables.
 */
public class BoundedRocksDB implements RocksDBConfigSetter {
    static volatile long totalBytes = 64L << 20;
    private static Cache cache;
    private static WriteBufferManager writeBuffers;

    private static synchronized void init() {
        if (cache == null) {
            cache = new LRUCache(totalBytes, -1, false, 0.1);
            writeBuffers = new WriteBufferManager(totalBytes / 4, cache);
        }
    }

    @Override
    public void setConfig(String storeName, Options options, Map<String, Object> configs) {
        init();
        BlockBasedTableConfigWithAccessibleCache table =
                (BlockBasedTableConfigWithAccessibleCache) options.tableFormatConfig();
        table.setBlockCache(cache);
        table.setCacheIndexAndFilterBlocks(true);
        table.setCacheIndexAndFilterBlocksWithHighPriority(true);
        table.setPinTopLevelIndexAndFilter(true);
        options.setWriteBufferManager(writeBuffers);
        options.setWriteBufferSize(4L << 20);
        options.setMaxWriteBufferNumber(2);
        options.setTableFormatConfig(table);
    }

    @Override
    public void close(String storeName, Options options) {
        // the shared cache and write buffer manager live as long as the process
    }
}

// Kafka's own Admin.describeLogDirs for tests (confluent-kafka's Python AdminClient has none).
// Run in Java's source-file mode with the harness classpath:
//   java -cp <kafka jars> DescribeLogDirs.java <bootstrap> <broker id>...
// Prints one line per replica: "<broker>\t<log dir path>\t<topic>\t<partition>\t<size bytes>",
// and one line "<broker>\t<log dir path>" per log dir (also the empty ones), then "done".
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.TopicPartition;

public class DescribeLogDirs {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        List<Integer> brokers = new ArrayList<>();
        for (int i = 1; i < args.length; i++) brokers.add(Integer.parseInt(args[i]));
        try (Admin admin = Admin.create(props)) {
            Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(brokers).allDescriptions().get();
            for (Map.Entry<Integer, Map<String, LogDirDescription>> b : all.entrySet()) {
                for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                    System.out.println(b.getKey() + "\t" + d.getKey());
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                        System.out.println(b.getKey() + "\t" + d.getKey() + "\t" + r.getKey().topic() + "\t"
                            + r.getKey().partition() + "\t" + r.getValue().size());
                    }
                }
            }
        }
        System.out.println("done");
    }
}

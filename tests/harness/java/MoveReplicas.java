// Real replica moves for tests, through Kafka's own Java Admin API (confluent-kafka's Python
// AdminClient has no alterPartitionReassignments / alterReplicaLogDirs). Run in Java's
// source-file mode with the harness classpath:
//   java -cp <kafka jars> MoveReplicas.java <bootstrap> replicas <topic> <partition> <b1,b2,...>
//   java -cp <kafka jars> MoveReplicas.java <bootstrap> logdir <topic> <partition> <broker> <dir>
// Each waits until the move has completed, then prints "done".
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

public class MoveReplicas {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        long deadline = System.currentTimeMillis() + 120_000;
        try (Admin admin = Admin.create(props)) {
            TopicPartition tp = new TopicPartition(args[2], Integer.parseInt(args[3]));
            if (args[1].equals("replicas")) {
                List<Integer> replicas = new ArrayList<>();
                for (String s : args[4].split(",")) replicas.add(Integer.parseInt(s));
                admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(replicas)))).all().get();
                while (!admin.listPartitionReassignments(Set.of(tp)).reassignments().get().isEmpty()) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("reassignment did not finish");
                    Thread.sleep(200);
                }
            } else if (args[1].equals("logdir")) {
                TopicPartitionReplica replica = new TopicPartitionReplica(tp.topic(), tp.partition(), Integer.parseInt(args[4]));
                String dir = args[5];
                admin.alterReplicaLogDirs(Map.of(replica, dir)).all().get();
                while (true) {
                    ReplicaLogDirInfo info = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
                    if (dir.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) break;
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("log dir move did not finish: " + info);
                    Thread.sleep(200);
                }
            } else {
                throw new IllegalArgumentException("unknown operation " + args[1]);
            }
        }
        System.out.println("done");
    }
}

//! What must hold after every step of a simulated cluster (checked through
//! [`crate::runtime::sim::check_every_step`], so a break is caught at the task poll that broke
//! it): one leader per leader epoch over the whole run, and a leader's high watermark never
//! moving back within its epoch (Kafka's rules; a follower's HW may move back, as Kafka's
//! does when a new leader's HW lags, so it is not checked).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::model::LeaderEpoch;
use crate::shard::Shard;

/// The partition's leaders and high watermarks seen so far.
#[derive(Default)]
pub struct LeaderInvariants {
    /// Which broker led each (partition, epoch).
    leaders: BTreeMap<(String, i32, LeaderEpoch), i32>,
    /// The highest HW the leader of each (partition, epoch) has shown.
    hws: BTreeMap<(String, i32, LeaderEpoch), i64>,
    /// Steps checked (a run that checked nothing checked nothing).
    pub steps: u64,
}

impl LeaderInvariants {
    /// Checks `topic`/`partition` on each running broker (id, shard).
    pub fn check(
        &mut self,
        topic: &str,
        partition: i32,
        brokers: impl IntoIterator<Item = (i32, Option<Rc<Shard>>)>,
    ) -> Result<(), String> {
        for (id, shard) in brokers {
            let Some(p) = shard.and_then(|s| s.partitions.get(topic, partition)) else {
                continue;
            };
            let Some(epoch) = p.leading_epoch() else {
                continue;
            };
            let key = (topic.to_string(), partition, epoch);
            let leader = *self.leaders.entry(key.clone()).or_insert(id);
            if leader != id {
                return Err(format!(
                    "brokers {leader} and {id} both led {topic}-{partition} at leader epoch {}",
                    epoch.0
                ));
            }
            let hw = p.high_watermark();
            let highest = self.hws.entry(key).or_insert(hw);
            if hw < *highest {
                return Err(format!(
                    "leader {id}'s high watermark of {topic}-{partition} moved back from {highest} \
                     to {hw} in leader epoch {}",
                    epoch.0
                ));
            }
            *highest = hw;
        }
        Ok(())
    }

    /// Leaderships seen ((partition, epoch) pairs).
    pub fn epochs(&self) -> usize {
        self.leaders.len()
    }
}

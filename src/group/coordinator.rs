//! TEMP compile stub (replaced by the real coordinator on merge).
#![allow(unused)]
use super::api::*;
pub struct GroupCoordinator;
#[derive(Debug, thiserror::Error)]
#[error("x")]
pub struct RecordError;
impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> Self {
        GroupCoordinator
    }
    pub fn begin_load(&mut self, partition: i32) {}
    pub fn replay(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        Ok(())
    }
    pub fn finish_load(&mut self, partition: i32, now_ms: i64) {}
    pub fn handle(&mut self, token: Token, call: Call, now_ms: i64) -> Output {
        Output::default()
    }
    pub fn tick(&mut self, now_ms: i64) -> Output {
        Output::default()
    }
    pub fn append_done(&mut self, id: u64, ok: bool, now_ms: i64) -> Output {
        Output::default()
    }
    pub fn snapshot_records(&self, partition: i32) -> Vec<OffsetsRecord> {
        vec![]
    }
}

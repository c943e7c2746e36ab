//! Follows a topology file: sends its contents whenever they change.
//!
//! Polling the contents (not the mtime) also follows a kubelet-style
//! ConfigMap volume, whose files are swapped through a `..data` symlink.

use std::{path::Path, time::Duration};

use tokio::sync::mpsc;

/// Sends the file's contents each time they differ from the last ones seen,
/// checking every `period`; the contents at start are taken as already staged.
///
/// Runs until the receiver is dropped.
pub async fn follow(path: &Path, period: Duration, sender: mpsc::Sender<String>) {
    let mut last = tokio::fs::read_to_string(path).await.ok();
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let current = match tokio::fs::read_to_string(path).await {
            Ok(text) => text,
            Err(_) => continue,
        };
        if last.as_deref() == Some(current.as_str()) {
            continue;
        }
        last = Some(current.clone());
        if sender.send(current).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Change detection on paused time.

    use super::*;

    #[tokio::test]
    async fn sends_only_changes() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let path = dir.path().join("topology.yaml");
        std::fs::write(&path, "one").unwrap_or_else(|err| panic!("{err}"));
        let (sender, mut receiver) = mpsc::channel(4);
        let follower = {
            let path = path.clone();
            tokio::spawn(async move { follow(&path, Duration::from_millis(5), sender).await })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(
            receiver.try_recv().is_err(),
            "the initial contents were sent as a change"
        );
        std::fs::write(&path, "two").unwrap_or_else(|err| panic!("{err}"));
        let received = tokio::time::timeout(Duration::from_secs(1), receiver.recv()).await;
        assert_eq!(received.ok().flatten().as_deref(), Some("two"));
        std::fs::remove_file(&path).unwrap_or_else(|err| panic!("{err}"));
        std::fs::write(&path, "two").unwrap_or_else(|err| panic!("{err}"));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(
            receiver.try_recv().is_err(),
            "unchanged contents were sent again"
        );
        follower.abort();
    }
}

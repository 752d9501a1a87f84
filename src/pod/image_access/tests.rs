//! kubelet's own cases: `TestFileBasedImagePullManager_MustAttemptImagePull` and
//! `Test_pulledRecordMergeNewCreds` (pkg/kubelet/images/pullmanager), with its test records.

use super::*;

fn secret(uid: &str, namespace: &str, name: &str, hash: &str) -> PullSecret {
    PullSecret {
        uid: uid.into(),
        namespace: namespace.into(),
        name: name.into(),
        credential_hash: hash.into(),
    }
}

fn record(json: &str) -> PulledRecord {
    serde_json::from_str(json).unwrap()
}

/// kubelet's testdata/pulled records.
const WITH_SECRET: &str = r#"{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"testimageref","credentialMapping":{"docker.io/testing/test":{"kubernetesSecrets":[{"uid":"testsecretuid","namespace":"default","name":"pull-secret","credentialHash":"testsecrethash"}]}}}"#;
const EMPTY_MAPPING: &str = r#"{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"testemptycredmapping","credentialMapping":{"docker.io/testing/test":{}}}"#;
const ANONYMOUS: &str = r#"{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"testimage-anonpull","credentialMapping":{"docker.io/testing/test":{"nodePodsAccessible":true}}}"#;
const BROKEN_HASH: &str = r#"{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"test-brokenhash","credentialMapping":{"docker.io/testing/test":{"kubernetesSecrets":[{"uid":"testsecretuid","namespace":"default","name":"pull-secret","credentialHash":""}]}}}"#;

/// (name, policy, pod secrets, repository, record, intent, must pull)
type Case<'a> = (
    &'a str,
    VerificationPolicy,
    Vec<PullSecret>,
    &'a str,
    Option<&'a str>,
    bool,
    bool,
);

#[test]
fn kubelets_must_attempt_image_pull_cases() {
    use VerificationPolicy::*;
    let exact = secret("testsecretuid", "default", "pull-secret", "testsecrethash");
    let test = "docker.io/testing/test";
    let cases: Vec<Case> = vec![
        (
            "recorded with the pod's exact secret",
            NeverVerifyPreloadedImages,
            vec![exact.clone()],
            test,
            Some(WITH_SECRET),
            false,
            false,
        ),
        (
            "recorded, no pod secrets",
            NeverVerifyPreloadedImages,
            vec![],
            test,
            Some(WITH_SECRET),
            false,
            true,
        ),
        (
            "recorded with the same secret, a different hash",
            NeverVerifyPreloadedImages,
            vec![secret(
                "testsecretuid",
                "default",
                "pull-secret",
                "differenthash",
            )],
            test,
            Some(WITH_SECRET),
            false,
            false,
        ),
        (
            "recorded with a secret of another UID",
            NeverVerifyPreloadedImages,
            vec![secret(
                "different uid",
                "default",
                "pull-secret",
                "differenthash",
            )],
            test,
            Some(WITH_SECRET),
            false,
            true,
        ),
        (
            "recorded with a different secret",
            NeverVerifyPreloadedImages,
            vec![secret(
                "testsecretuid",
                "differentns",
                "pull-secret",
                "differenthash",
            )],
            test,
            Some(WITH_SECRET),
            false,
            true,
        ),
        (
            "a different secret with the same hash",
            NeverVerifyPreloadedImages,
            vec![secret(
                "testsecretuid",
                "differentns",
                "pull-secret",
                "testsecrethash",
            )],
            test,
            Some(WITH_SECRET),
            false,
            false,
        ),
        (
            "recorded for another image name with the same secret",
            NeverVerifyPreloadedImages,
            vec![exact.clone()],
            "docker.io/testing/different",
            Some(WITH_SECRET),
            false,
            true,
        ),
        (
            "recorded with an empty credential mapping",
            NeverVerifyPreloadedImages,
            vec![],
            test,
            Some(EMPTY_MAPPING),
            false,
            true,
        ),
        (
            "present without records (preloaded)",
            NeverVerifyPreloadedImages,
            vec![],
            test,
            None,
            false,
            false,
        ),
        (
            "present without records, AlwaysVerify",
            AlwaysVerify,
            vec![],
            test,
            None,
            false,
            true,
        ),
        (
            "only a pull intent",
            NeverVerifyPreloadedImages,
            vec![exact.clone()],
            test,
            None,
            true,
            true,
        ),
        (
            "only a pull intent, NeverVerify",
            NeverVerify,
            vec![exact.clone()],
            test,
            None,
            true,
            false,
        ),
        (
            "node-accessible, no pod secrets",
            NeverVerifyPreloadedImages,
            vec![],
            test,
            Some(ANONYMOUS),
            false,
            false,
        ),
        (
            "node-accessible, with pod secrets",
            NeverVerifyPreloadedImages,
            vec![exact.clone()],
            test,
            Some(ANONYMOUS),
            false,
            false,
        ),
        (
            "empty hash recorded, another secret with none",
            NeverVerifyPreloadedImages,
            vec![secret("testsecretuid", "differentns", "pull-secret", "")],
            test,
            Some(BROKEN_HASH),
            false,
            true,
        ),
        (
            "empty hash recorded, the same secret",
            NeverVerifyPreloadedImages,
            vec![secret("testsecretuid", "default", "pull-secret", "")],
            test,
            Some(BROKEN_HASH),
            false,
            false,
        ),
        (
            "allowlisted by prefix",
            NeverVerifyAllowlistedImages(vec!["docker.io/testing/*".into()]),
            vec![],
            test,
            Some(WITH_SECRET),
            false,
            false,
        ),
        (
            "not allowlisted",
            NeverVerifyAllowlistedImages(vec!["docker.io/testing/other".into()]),
            vec![],
            test,
            Some(WITH_SECRET),
            false,
            true,
        ),
    ];
    for (name, policy, pod, repo, rec, intent, want) in cases {
        let rec = rec.map(record);
        let known = Known {
            record: rec.as_ref(),
            intent,
        };
        assert_eq!(
            must_attempt_pull(&policy, repo, known, &pod).pull,
            want,
            "{name}"
        );
    }
}

#[test]
fn a_match_by_hash_or_by_secret_is_remembered() {
    let rec = record(WITH_SECRET);
    let known = Known {
        record: Some(&rec),
        intent: false,
    };
    let repo = "docker.io/testing/test";
    let p = &DEFAULT_POLICY;
    let exact = secret("testsecretuid", "default", "pull-secret", "testsecrethash");
    assert_eq!(
        must_attempt_pull(p, repo, known, std::slice::from_ref(&exact)).remember,
        None
    );
    let copied = secret("u2", "other", "copy", "testsecrethash");
    assert_eq!(
        must_attempt_pull(p, repo, known, std::slice::from_ref(&copied)).remember,
        Some(copied)
    );
    let rotated = secret("testsecretuid", "default", "pull-secret", "newhash");
    assert_eq!(
        must_attempt_pull(p, repo, known, std::slice::from_ref(&rotated)).remember,
        Some(rotated)
    );
}

fn merge_base() -> PulledRecord {
    let mut r = PulledRecord {
        kind: RECORD_KIND.into(),
        api_version: RECORD_API_VERSION.into(),
        last_updated_time: "2022-02-22T12:00:00Z".into(),
        image_ref: "testImageRef".into(),
        credential_mapping: BTreeMap::new(),
    };
    let m = &mut r.credential_mapping;
    m.insert(
        "test-image1".into(),
        PullCredentials {
            kubernetes_secrets: vec![secret("uid1", "namespace1", "name1", "hash1")],
            node_pods_accessible: false,
        },
    );
    m.insert(
        "test-image2".into(),
        PullCredentials {
            kubernetes_secrets: vec![
                secret("uid1", "namespace1", "name1", "hash1"),
                secret("uid2", "namespace2", "name2", "hash2"),
            ],
            node_pods_accessible: false,
        },
    );
    m.insert("test-nodewide".into(), PullCredentials::of_pull(None));
    r
}

#[test]
fn kubelets_pulled_record_merge_cases() {
    let now = "2026-01-01T00:00:00Z";
    let secrets = |s: Vec<PullSecret>| PullCredentials {
        kubernetes_secrets: s,
        node_pods_accessible: false,
    };
    let cases = vec![
        (
            "create a new image record",
            "new-image",
            secrets(vec![secret("newuid", "newnamespace", "newname", "newhash")]),
            Some(secrets(vec![secret(
                "newuid",
                "newnamespace",
                "newname",
                "newhash",
            )])),
        ),
        (
            "merge with an existing image secret",
            "test-image1",
            secrets(vec![secret("newuid", "newnamespace", "newname", "newhash")]),
            Some(secrets(vec![
                secret("uid1", "namespace1", "name1", "hash1"),
                secret("newuid", "newnamespace", "newname", "newhash"),
            ])),
        ),
        (
            "merge with existing image record secrets",
            "test-image2",
            secrets(vec![secret("newuid", "namespace1", "newname", "newhash")]),
            Some(secrets(vec![
                secret("uid1", "namespace1", "name1", "hash1"),
                secret("newuid", "namespace1", "newname", "newhash"),
                secret("uid2", "namespace2", "name2", "hash2"),
            ])),
        ),
        (
            "node-accessible overrides all secrets",
            "test-image2",
            PullCredentials::of_pull(None),
            Some(PullCredentials::of_pull(None)),
        ),
        (
            "the same secret coordinates with a different hash",
            "test-image2",
            secrets(vec![secret("uid2", "namespace2", "name2", "newhash")]),
            Some(secrets(vec![
                secret("uid1", "namespace1", "name1", "hash1"),
                secret("uid2", "namespace2", "name2", "newhash"),
            ])),
        ),
        (
            "the same hash with different coordinates",
            "test-image2",
            secrets(vec![secret("uid3", "namespace2", "name3", "hash2")]),
            Some(secrets(vec![
                secret("uid1", "namespace1", "name1", "hash1"),
                secret("uid2", "namespace2", "name2", "hash2"),
                secret("uid3", "namespace2", "name3", "hash2"),
            ])),
        ),
        (
            "a node-wide image stays node-wide",
            "test-nodewide",
            secrets(vec![secret("uid3", "namespace2", "name3", "hash2")]),
            None,
        ),
        (
            "a secret already recorded changes nothing",
            "test-image1",
            secrets(vec![secret("uid1", "namespace1", "name1", "hash1")]),
            None,
        ),
    ];
    let base = merge_base();
    for (name, image, creds, want) in cases {
        let got = record_pulled(Some(&base), "testImageRef", image, Some(&creds), now);
        match want {
            None => assert_eq!(got, None, "{name}"),
            Some(w) => {
                let got = got.unwrap_or_else(|| panic!("{name}: no update"));
                let mut expected = base.clone();
                expected.credential_mapping.insert(image.into(), w);
                expected.last_updated_time = now.into();
                assert_eq!(got, expected, "{name}");
            }
        }
    }
    // Unknown credentials (an interrupted pull found later) add nothing to a record.
    assert_eq!(
        record_pulled(Some(&base), "testImageRef", "test-image1", None, now),
        None
    );
}

#[test]
fn a_first_record_names_the_pull_or_nobody() {
    let now = "2026-01-01T00:00:00Z";
    let c = PullCredentials::of_pull(Some(secret("u", "default", "regcred", "h")));
    let r = record_pulled(None, "sha256:abc", "r:5000/app", Some(&c), now).unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2026-01-01T00:00:00Z","imageRef":"sha256:abc","credentialMapping":{"r:5000/app":{"kubernetesSecrets":[{"uid":"u","namespace":"default","name":"regcred","credentialHash":"h"}]}}}"#
    );
    assert_eq!(record(&json), r);
    // With unknown credentials the image is kubelet's, and every pod verifies.
    let r = record_pulled(None, "sha256:abc", "r:5000/app", None, now).unwrap();
    assert!(r.credential_mapping.is_empty());
    let known = Known {
        record: Some(&r),
        intent: false,
    };
    assert!(must_attempt_pull(&DEFAULT_POLICY, "r:5000/app", known, &[]).pull);
}

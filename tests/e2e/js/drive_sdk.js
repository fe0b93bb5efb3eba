// Drives a live pai master through OpenPAI's official JavaScript SDK (@microsoft/openpai-js-sdk), as the VS Code
// extension does, and prints what each step got as one JSON object on stdout (tests/e2e/test_js_sdk.py checks it).
// Usage: node drive_sdk.js HOST:PORT ADMIN_PASSWORD   (NODE_PATH names the SDK's node_modules)
'use strict';
const { PAIV2 } = require('@microsoft/openpai-js-sdk');

const [server, adminPassword] = process.argv.slice(2);
const out = {};

function client(username, password) {
  return new PAIV2.OpenPAIClient({ rest_server_uri: server, https: false, username, password });
}

async function error(promise) {
  try {
    await promise;
    return { status: 'no error' };
  } catch (e) {
    return { status: e.status, code: e.data && e.data.code, message: e.data && e.data.message,
             type: e.constructor.name };
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, probe, seconds) {
  for (let i = 0; i < seconds * 4; i++) {
    const value = await probe();
    if (value) return value;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const twoInstances = {
  protocolVersion: 2, name: 'sdk-pair', type: 'job',
  prerequisites: [{ type: 'dockerimage', name: 'img', uri: 'busybox' }],
  taskRoles: { worker: { instances: 2, dockerImage: 'img',
    resourcePerInstance: { cpu: 1, memoryMB: 128, gpu: 0 },
    commands: ['echo "I am $PAI_TASK_INDEX of $PAI_TASK_ROLE_TASK_COUNT_worker"'] } },
};
const longJob = { ...twoInstances, name: 'sdk-long',
  taskRoles: { worker: { ...twoInstances.taskRoles.worker, instances: 1, commands: ['sleep 600'] } } };

(async () => {
  const admin = client('admin', adminPassword);
  out.info = await admin.api.getClusterInfo();
  out.vcs = await admin.virtualCluster.listVirtualClusters();
  out.vc = await admin.virtualCluster.getVirtualCluster('default');
  out.storages = await admin.storage.getStorages();
  out.tokens = await admin.token.getTokens();

  out.createUser = await admin.user.createUser({ username: 'sdkuser', password: 'sdk-secret', admin: false,
    email: 'sdk@example.com', virtualCluster: ['default'] });
  out.getUser = await admin.user.getUser('sdkuser');
  out.users = (await admin.user.getAllUser()).map((u) => u.username);
  out.groups = (await admin.group.getAllGroup()).map((g) => g.groupname);

  out.submit = await admin.job.createJob(twoInstances);
  out.done = await until('sdk-pair to succeed', async () => {
    const job = await admin.job.getJob('admin', 'sdk-pair');
    return ['SUCCEEDED', 'FAILED', 'STOPPED'].includes(job.jobStatus.state) && job;
  }, 60);
  out.config = await admin.job.getJobConfig('admin', 'sdk-pair');
  out.attempt0 = await admin.job.getJob('admin', 'sdk-pair', 0);
  out.task = await admin.job.getTask('admin', 'sdk-pair', 0, 'worker', 1);
  out.taskLogs = await admin.job.getTaskLogs('admin', 'sdk-pair', 0, 'worker', 1, 0, true);
  out.stdout = await admin.httpClient.get(`http://${server}${out.taskLogs.locations[0].uri}`);
  out.events = await admin.job.listEvents('admin', 'sdk-pair');
  out.addTag = await admin.job.addTag('admin', 'sdk-pair', 'sdk-tag');
  out.tagged = (await admin.job.listJobs({ tagsContain: 'sdk-tag' })).map((j) => j.name);
  out.deleteTag = await admin.job.deleteTag('admin', 'sdk-pair', 'sdk-tag');
  out.taggedAfter = (await admin.job.listJobs({ tagsContain: 'sdk-tag' })).map((j) => j.name);
  out.skuTypes = await admin.virtualCluster.getVirtualClusterSkuTypes('default');
  out.listed = (await admin.job.listJobs({ username: 'admin', state: 'SUCCEEDED' })).map((j) => j.name);
  out.listedOther = (await admin.job.listJobs({ username: 'sdkuser' })).map((j) => j.name);

  await admin.job.createJob(longJob);
  await until('sdk-long to run', async () => (await admin.job.getJob('admin', 'sdk-long')).jobStatus.state === 'RUNNING', 60);
  out.stop = await admin.job.updateJobExecutionType('admin', 'sdk-long', 'STOP');
  out.stopped = (await until('sdk-long to stop', async () => {
    const job = await admin.job.getJob('admin', 'sdk-long');
    return job.jobStatus.state === 'STOPPED' && job;
  }, 60)).jobStatus.state;

  // Behind OpenPAI's pylon the API is under /rest-server: a client given that URI works the same
  const pylon = new PAIV2.OpenPAIClient({ rest_server_uri: `${server}/rest-server`, https: false, username: 'admin',
    password: adminPassword });
  out.pylon = {
    info: await pylon.api.getClusterInfo(),
    listed: (await pylon.job.listJobs({ username: 'admin' })).map((j) => j.name).sort(),
    state: (await pylon.job.getJob('admin', 'sdk-pair')).jobStatus.state,
    configName: (await pylon.job.getJobConfig('admin', 'sdk-pair')).name,
    submit: await pylon.job.createJob({ ...longJob, name: 'sdk-pylon' }),
    stop: await pylon.job.updateJobExecutionType('admin', 'sdk-pylon', 'STOP'),
    unknownJob: await error(pylon.job.getJob('admin', 'no-such-job')),
  };

  out.errors = {
    // The SDK logs in on its first call; a refused login is thrown by its own login (a later call wraps that
    // error again and loses it, with OpenPAI too), so the login is asked for directly here.
    wrongPassword: await error(client('admin', 'wrong-password').httpClient.login()),
    duplicateJob: await error(admin.job.createJob(twoInstances)),
    unknownJob: await error(admin.job.getJob('admin', 'no-such-job')),
    unknownVc: await error(admin.virtualCluster.getVirtualCluster('no-such-vc')),
    unknownUser: await error(admin.user.getUser('no-such-user')),
    unknownStorage: await error(admin.storage.getStorage('no-such-storage')),
    userCreatesUser: await error(client('sdkuser', 'sdk-secret').user.createUser({ username: 'x2',
      password: 'secret12', admin: false, virtualCluster: [] })),
  };
  out.deleteUser = await admin.user.deleteUser('sdkuser');
  out.usersAfter = (await admin.user.getAllUser()).map((u) => u.username);
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(`step failed: ${e.status || ''} ${JSON.stringify(e.data || e.message || e)}\n${e.stack}\n`);
  process.stdout.write(JSON.stringify(out));
  process.exit(1);
});

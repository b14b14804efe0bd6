export {
  exportsMissingFromReadme,
  namesMissingFrom,
  publicDeclarations,
  publicNames,
  type PublicDeclaration,
} from './public-names.js';
export {
  EXAMPLE_INFO,
  exampleAsModule,
  readmeExample,
  runReadmeExample,
  type ExampleOptions,
  type ExampleRun,
} from './readme-example.js';

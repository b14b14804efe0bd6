export {
  exportsMissingFromReadme,
  namesMissingFrom,
  publicDeclarations,
  publicNames,
  type PublicDeclaration,
} from './public-names.js';
export {
  EXAMPLE_INFO,
  codeBlocks,
  exampleAsModule,
  markdownSection,
  readmeExample,
  runReadmeExample,
  type ExampleOptions,
  type ExampleRun,
} from './readme-example.js';
